"""Adapters at the edge: DynamoDB, EMR Serverless, S3, EventBridge, SQS and Kafka message parsing."""
