"""Tests of the synthesised CDK app (templates and cdk-nag), one synth per environment config."""
