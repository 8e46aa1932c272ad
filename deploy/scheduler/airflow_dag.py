"""Airflow alternative to Cloud Scheduler: one Flex Template launch per day, for that day.

Needs apache-airflow-providers-google. Set the Airflow variables tfrecord_etl_project,
tfrecord_etl_region, tfrecord_etl_bucket, tfrecord_etl_input and tfrecord_etl_output (both may
hold {date}, filled in with the DAG run's date). A rerun of a day is harmless: the job finds
that day's complete manifest and exits 0.
"""

import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.providers.google.cloud.operators.dataflow import DataflowStartFlexTemplateOperator

with DAG(
    dag_id="tfrecord_etl_daily",
    schedule="0 2 * * *",
    start_date=datetime.datetime(2026, 12, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": datetime.timedelta(minutes=10)},
) as dag:
    bucket = Variable.get("tfrecord_etl_bucket", default_var="my-bucket")
    DataflowStartFlexTemplateOperator(
        task_id="convert",
        project_id=Variable.get("tfrecord_etl_project", default_var="my-project"),
        location=Variable.get("tfrecord_etl_region", default_var="europe-west1"),
        wait_until_finished=True,
        body={
            "launchParameter": {
                "jobName": "tfrecord-etl-{{ ds_nodash }}",
                "containerSpecGcsPath": f"gs://{bucket}/templates/tfrecord-etl.json",
                "parameters": {
                    "input": Variable.get(
                        "tfrecord_etl_input", default_var="gs://b/raw/{date}/*.csv"
                    ),
                    "output": Variable.get("tfrecord_etl_output", default_var="gs://b/ds/{date}"),
                    "run_date": "{{ ds }}",
                },
                "environment": {"tempLocation": f"gs://{bucket}/tmp"},
            }
        },
    )
