"""The instructor's operations on a class: a batch of submissions (batch.py), cut into shards and
merged back (shard.py). Not shipped to students."""
