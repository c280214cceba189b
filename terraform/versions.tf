# Provider pins. State stays local unless you add a backend "gcs" block here (recommended for a team:
# a bucket of its own, versioned, named in `terraform init -backend-config=bucket=...`).
terraform {
  required_version = ">= 1.6"
  required_providers {
    # 6.50 is the schema tests/test_terraform.py checks every argument against (the google provider's schema as
    # @cdktf/provider-google 16.12.1 ships it); 7.x renamed and removed arguments, so it is not admitted unchecked.
    google = {
      source  = "hashicorp/google"
      version = "~> 6.50"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
