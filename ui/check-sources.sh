#!/usr/bin/env bash
# check-sources.sh UI_DIR: every file of UI_DIR/src is listed in
# ui_sources (UI_DIR/meson.build); names those that are not.
set -u
dir=$1 rc=0
for f in "$dir"/src/*; do
  name=$(basename "$f")
  if ! grep -qF "'src/$name'" "$dir/meson.build"; then
    echo "ui/src/$name is not in ui_sources (ui/meson.build): ninja would not rebuild the UI when it changes"
    rc=1
  fi
done
exit $rc
