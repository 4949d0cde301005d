#!/bin/bash
# Reward 1 when one new commit with the exact message fixes every "teh" and nothing is left over.
mkdir -p /logs/verifier
reward=0
cd /app/repo &&
  [ "$(git log -1 --format=%B | sed '/^$/d')" = "Fix typo in README" ] &&
  [ "$(git rev-list --count HEAD)" = 2 ] &&
  [ "$(git log -1 --format=%s HEAD~1)" = "Add README" ] &&
  [ "$(git show HEAD:README.md)" = "$(printf '# Widgets\n\nthe widget library keeps the widgets.')" ] &&
  [ -z "$(git status --porcelain)" ] &&
  reward=1
echo "$reward" > /logs/verifier/reward.txt
