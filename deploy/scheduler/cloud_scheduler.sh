#!/usr/bin/env bash
# A daily Cloud Scheduler job that launches the Flex Template at 02:00 UTC. The run_date is
# left out, so each launch converts "today, UTC" into OUTPUT/{date}; a retried launch finds the
# complete manifest and exits 0 (idempotent), so Cloud Scheduler retries are harmless.
#   PROJECT=... REGION=... BUCKET=... SERVICE_ACCOUNT=... deploy/scheduler/cloud_scheduler.sh \
#       'gs://my-bucket/raw/*.csv' 'gs://my-bucket/ds/{date}'
set -euo pipefail
: "${PROJECT:?}" "${REGION:?}" "${BUCKET:?}" "${SERVICE_ACCOUNT:?}"
input=${1:?input pattern} output=${2:?output directory}
body=$(cat <<JSON
{"launchParameter": {
  "jobName": "tfrecord-etl-daily",
  "containerSpecGcsPath": "gs://${BUCKET}/templates/tfrecord-etl.json",
  "parameters": {"input": "${input}", "output": "${output}"},
  "environment": {"tempLocation": "gs://${BUCKET}/tmp"}}}
JSON
)
gcloud scheduler jobs create http tfrecord-etl-daily \
    --project "${PROJECT}" --location "${REGION}" --schedule "0 2 * * *" --time-zone "Etc/UTC" \
    --uri "https://dataflow.googleapis.com/v1b3/projects/${PROJECT}/locations/${REGION}/flexTemplates:launch" \
    --http-method POST --headers "Content-Type=application/json" --message-body "${body}" \
    --oauth-service-account-email "${SERVICE_ACCOUNT}" --max-retry-attempts 3
