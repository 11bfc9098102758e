"""The game's rules as pure JAX functions over ``EnvState``, and their tables.

Nothing in this package imports anything outside it (tests/test_layout.py checks): the rules do
not know about the gymnax contract, the Swift protocol, the viewers or the trainer."""
