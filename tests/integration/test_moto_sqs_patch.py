"""The local runtime's moto SQS patches change the cost of a deep queue, not SQS's behaviour.

The same scenario runs in two fresh interpreters, one with moto as shipped and one patched; both must give what
SQS gives, step by step: visibility timeouts, delays, redrive to the DLQ after the maximum receives, deleting
twice, an unknown receipt handle, exact approximate counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import json, sys, time
    import boto3
    from moto import mock_aws

    if sys.argv[1] == "patched":
        from assetflow_dev.moto_server import patch_sqs
        patch_sqs()
        patch_sqs()  # idempotent
    seen = []

    def counts(sqs, url):
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return [int(attrs[k]) for k in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )]

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(
            QueueName="q",
            Attributes={
                "VisibilityTimeout": "1",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}),
            },
        )["QueueUrl"]
        for n in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
        sqs.send_message(QueueUrl=url, MessageBody="late", DelaySeconds=2)
        seen.append(["sent", counts(sqs, url)])
        first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3)["Messages"]
        seen.append(["received", sorted(m["Body"] for m in first), counts(sqs, url)])
        handle = first[0]["ReceiptHandle"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)  # twice: fine
        try:
            sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
        except sqs.exceptions.ReceiptHandleIsInvalid:
            seen.append(["unknown handle refused"])
        seen.append(["deleted one", counts(sqs, url)])
        time.sleep(2.2)  # the two kept in flight are visible again, the late one no longer delayed
        again = []
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
            again += batch
        seen.append(["second receive", sorted(m["Body"] for m in again), counts(sqs, url)])
        time.sleep(1.2)
        third = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        seen.append(["third receive", sorted(m["Body"] for m in third)])
        dead = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
        seen.append(["dead-lettered", sorted(m["Body"] for m in dead)])
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(third)],
        )
        seen.append(["drained", counts(sqs, url)])
    print(json.dumps(seen))
    """
)


def run(mode: str) -> list[list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, mode], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_patched_sqs_behaves_as_moto_and_sqs_do() -> None:
    plain, patched = run("plain"), run("patched")
    assert patched == plain
    assert patched[0] == ["sent", [5, 0, 1]]
    assert patched[1][0] == "received" and len(patched[1][1]) == 3 and patched[1][2] == [2, 3, 1]
    assert ["unknown handle refused"] in patched
    assert ["deleted one", [2, 2, 1]] in patched
    # m-received-once twice redelivered, the rest first delivered, the late one now due: 5 messages
    second = next(s for s in patched if s[0] == "second receive")
    assert len(second[1]) == 5 and "late" in second[1] and second[2] == [0, 5, 0]
    # The two received twice already went to the DLQ on this receive; three are delivered a second time.
    third = next(s for s in patched if s[0] == "third receive")
    dead = next(s for s in patched if s[0] == "dead-lettered")
    assert len(third[1]) + len(dead[1]) == 5 and len(dead[1]) == 2
    assert patched[-1] == ["drained", [0, 0, 0]]
