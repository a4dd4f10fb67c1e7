# A cell to try contexts: probe the shape, grep, then read around the match.
print(peek(200))
hits = grep("Landlock", context_lines=1, max_matches=3)
print(hits)
FINAL(f"{len(hits)} matching lines; first at line {hits[0].line_no}" if hits else "no match")
