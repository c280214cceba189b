# Provider pins. State stays local unless you add a backend "gcs" block here (recommended for a team:
# a bucket of its own, versioned, named in `terraform init -backend-config=bucket=...`).
terraform {
  required_version = ">= 1.6"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.20, < 8.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
