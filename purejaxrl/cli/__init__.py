"""The trainer's command lines (argument parsing and ``main``): ``train`` (scripts/
train_purejaxrl.py, the ``hackmatrix-train`` command) and ``evaluate`` (scripts/evaluate.py,
``hackmatrix-evaluate``). Importing one picks the JAX platform first (``backend``)."""
