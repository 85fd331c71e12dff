#!/usr/bin/env bash
# Every relative link of the installed documentation resolves: each Markdown file under DOCDIR
# (the README, docs/*.md) links only files installed beside it ("](path)" and "](path#anchor)";
# web addresses are not checked).
#   check_doc_links.sh DOCDIR
set -u
doc=$1
fail=0 n=0
while IFS= read -r md; do
  dir=$(dirname "$md")
  for link in $(grep -oE '\]\([^)# ]+' "$md" | sed 's/^](//'); do
    case "$link" in *://* | mailto:*) continue ;; esac
    n=$((n + 1))
    [ -e "$dir/$link" ] || { echo "${md#"$doc"/} links $link, which is not installed"; fail=1; }
  done
done < <(find "$doc" -name '*.md')
[ "$n" -gt 0 ] || { echo "no links found under $doc"; fail=1; }
[ $fail = 0 ] && echo "the installed documentation's $n links resolve"
exit $fail
