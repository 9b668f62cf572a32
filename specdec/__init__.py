"""specdec: command-line views and configuration over acceptance/ and model/."""
__version__ = "0.1.0"
