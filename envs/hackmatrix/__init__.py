"""HackMatrix as a pure JAX environment (gymnax API)."""
