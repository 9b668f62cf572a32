"""What acceptance is worth: cost model, speedup, γ recommendation, vLLM config output."""
