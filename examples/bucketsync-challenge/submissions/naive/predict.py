"""A weak submission: calls every odd number above 1 prime (plus 2)."""


def predict(n: int) -> bool:
    return n == 2 or (n > 1 and n % 2 == 1)
