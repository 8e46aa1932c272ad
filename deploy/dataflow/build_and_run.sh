#!/usr/bin/env bash
# Builds the image and the Flex Template spec, then launches one conversion.
#   PROJECT=my-project REGION=europe-west1 BUCKET=my-bucket deploy/dataflow/build_and_run.sh \
#       'gs://my-bucket/raw/{date}/*.csv' 'gs://my-bucket/ds/{date}' [YYYY-MM-DD]
# Needs: gcloud (authenticated), docker, an Artifact Registry repository named tfrecord-etl.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${PROJECT:?set PROJECT}" "${REGION:?set REGION}" "${BUCKET:?set BUCKET}"
input=${1:?input pattern} output=${2:?output directory} run_date=${3:-$(date -u +%F)}
image="${REGION}-docker.pkg.dev/${PROJECT}/tfrecord-etl/tfrecord-etl:$(git rev-parse --short HEAD)"
spec="gs://${BUCKET}/templates/tfrecord-etl.json"

docker build -f deploy/dataflow/Dockerfile -t "${image}" .
docker push "${image}"
gcloud dataflow flex-template build "${spec}" \
    --image "${image}" --sdk-language PYTHON --metadata-file deploy/dataflow/metadata.json \
    --project "${PROJECT}"
gcloud dataflow flex-template run "tfrecord-etl-${run_date}" \
    --template-file-gcs-location "${spec}" --region "${REGION}" --project "${PROJECT}" \
    --parameters "input=${input//\{date\}/${run_date}},output=${output},run_date=${run_date}" \
    --parameters "sdk_container_image=${image}" \
    --temp-location "gs://${BUCKET}/tmp"
