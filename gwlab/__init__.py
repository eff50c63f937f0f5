"""gwlab."""
