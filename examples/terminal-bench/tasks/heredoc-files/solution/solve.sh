#!/bin/bash
cat > /app/deploy.env <<'EOF'
# deploy settings
TARGET=$HOME/releases
STAMP=`date +%s`
GREETING="tabs	and  spaces"
EOF
mkdir -p /app/hosts
for host in alpha beta gamma; do
  cat > "/app/hosts/$host.conf" <<EOF
name=$host
EOF
done
cat /app/deploy.env /app/hosts/*.conf
