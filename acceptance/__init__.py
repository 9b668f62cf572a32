"""What the drafts achieve: sources of vLLM counters, the store, windows and estimates."""
