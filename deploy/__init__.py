"""Deployment artefacts (container image, compose file, Kubernetes manifests) and their checks.

The Python modules here render the kustomize overlays with a real ``kubectl kustomize`` and
check what comes out against the Kubernetes schemas and against what the services read
(``python -m deploy.checks`` runs every check; the tests under ``tests/*/test_deploy_*`` too).
"""
