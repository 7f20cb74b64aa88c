"""Reads spanning slices: the digest and the `/v1/updates` stream."""
