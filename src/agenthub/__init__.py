"""agenthub: messaging and collaboration backbone for fleets of AI agents."""

__version__ = "0.1.0"
