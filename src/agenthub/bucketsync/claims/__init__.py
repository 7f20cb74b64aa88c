"""Experiment claims (issue 18, item 1): a short "I am trying X" lease over an idea."""
