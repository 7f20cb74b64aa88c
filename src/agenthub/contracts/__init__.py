"""Wire contracts shared by agenthub's services, in the standard library only.

A contract module states what crosses the wire between two services (names,
cursor encodings, field lists, hashes) once, so the producer and the consumer
import the same definition instead of keeping copies that drift apart. It
imports nothing of agenthub's and no third-party package.
"""
