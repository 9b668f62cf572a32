"""The dashboard's pages: each ``render(fleet)`` formats and charts a data.FleetView."""
