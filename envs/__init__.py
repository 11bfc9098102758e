"""Pure JAX environments of this repository."""
