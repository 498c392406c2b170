"""pier: self-hosted LLM endpoints on your own machines."""

__version__ = "0.1.0"
