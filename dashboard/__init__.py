"""Streamlit + Plotly dashboard over the store and the package's functions."""
