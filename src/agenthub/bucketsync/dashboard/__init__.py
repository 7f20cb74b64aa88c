"""The human dashboard (seed §10, §11, §13): a no-build single-page app, the same-origin
proxy it polls through (`wait=0` forced), and the sign-in flows (local token, HF OAuth)."""
