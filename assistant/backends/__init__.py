"""LLM backends behind one small protocol, registered by name."""
