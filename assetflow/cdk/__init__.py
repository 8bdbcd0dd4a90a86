"""The CDK app of assetflow: one construct per capability, composed by ``AssetflowService`` into one stack."""
