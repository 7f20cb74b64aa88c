"""The scoring loop: jobs, the quota, verdicts and the verifier, assembled in
`assembly.py`."""
