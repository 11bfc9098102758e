"""Host-side I/O in the Swift game's terms: setState scenarios (``scenario``), the Swift-shaped
raw observation (``raw_observation``), the headless JSON protocol server (``protocol``), building
the Swift binary (``swift_build``), and the parity harness that holds the JAX env to a Swift
binary: its engines (``engines``), its equality rules (``compare``), its two lockstep drivers
(``lockstep`` for engines sharing the key stream, ``oracle`` against Swift, with
``draw_fitting`` and ``adoption``), its divergence reports (``divergence``) and the statistics
of the generation laws (``parity_statistics``)."""
