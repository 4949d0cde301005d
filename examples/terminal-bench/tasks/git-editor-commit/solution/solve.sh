#!/bin/bash
cd /app/repo
sed -i 's/\bteh\b/the/g' README.md
git add README.md
git commit
1i
Fix typo in README
.
w
q
git log --oneline
