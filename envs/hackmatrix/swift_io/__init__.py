"""Host-side I/O in the Swift game's terms: setState scenarios, the Swift-shaped raw
observation, the headless JSON protocol server and the parity client that plays the JAX env in
lockstep with a Swift binary."""
