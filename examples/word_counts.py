# A cell to try the sandbox: pure text work with allowed modules, then FINAL.
import collections
import re

text = """It was the best of times, it was the worst of times, it was the age of wisdom,
it was the age of foolishness, it was the epoch of belief, it was the epoch of incredulity"""
counts = collections.Counter(re.findall(r"[a-z]+", text.lower()))
top = counts.most_common(3)
print("top words:", top)
FINAL(top[0][0])
