"""Random values derived from raw bits (decisions R2: same distributions as Swift's draws)."""

import jax
import jax.numpy as jnp

_FLOAT_ONE_BITS = 0x3F800000


# Each jax.random call inlines a threefry graph, which costs compile time in the env step; the
# generators here draw raw bits once and derive every value from them with these two helpers.
def unit_interval(bits: jax.Array) -> jax.Array:
    """uint32 random bits -> float32 uniform on [0, 1) (23-bit resolution, as
    jax.random.uniform)."""
    mantissa = (bits >> jnp.uint32(9)) | jnp.uint32(_FLOAT_ONE_BITS)
    return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0


def uniform_below(bits: jax.Array, n) -> jax.Array:
    """uint32 random bits -> int32 uniform on 0..n-1 (``n`` >= 1, bias below n / 2**32)."""
    return (bits % jnp.asarray(n).astype(jnp.uint32)).astype(jnp.int32)
