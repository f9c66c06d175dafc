"""Translation: the reader's language, the labels of closed sets of values, lazy and template text."""
