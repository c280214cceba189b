output "cluster_name" {
  description = "GKE cluster name."
  value       = google_container_cluster.this.name
}

output "region" {
  description = "Region of the cluster, bucket and registry."
  value       = var.region
}

output "bucket" {
  description = "Results bucket."
  value       = google_storage_bucket.results.name
}

output "results_uri" {
  description = "Where runs write and the dashboard reads (make's RESULTS_URI)."
  value       = "gs://${google_storage_bucket.results.name}/results"
}

output "image_repository" {
  description = "Artifact Registry path to push images to (make's REGISTRY)."
  value       = local.image_repository
}

output "dashboard_ip_name" {
  description = "Name of the dashboard's global static IP (empty unless dashboard_static_ip = true)."
  value       = join("", google_compute_global_address.dashboard[*].name)
}

locals {
  # specs/lab5.yaml's families: k8s/render.py refuses more shards than a spec has (a shard takes whole families), so
  # next_steps' submit asks for no more (tests/test_terraform.py counts them from the spec).
  lab5_families = 18
}

output "next_steps" {
  description = "The commands that follow, with this deployment's values filled in."
  value       = <<-EOT
    gcloud container clusters get-credentials ${google_container_cluster.this.name} --region ${var.region} --project ${var.project_id}
    gcloud auth configure-docker ${var.region}-docker.pkg.dev
    REGISTRY="${local.image_repository}"
    TAG="$(git rev-parse --short HEAD)"
    SHA="$(git rev-parse HEAD)$(git diff --quiet HEAD || echo -dirty)"
    docker buildx build --platform linux/amd64 --target runner --build-arg ATTNBENCH_GIT_SHA="$SHA" -t "$REGISTRY/attnbench:runner-$TAG" --push .
    docker buildx build --platform linux/amd64 --target dashboard -t "$REGISTRY/attnbench:dashboard-$TAG" --push .
    make deploy
    make submit SPEC=specs/lab5.yaml SHARDS=${min(var.l4_max_nodes, local.lab5_families)}
  EOT
}
