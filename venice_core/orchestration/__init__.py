"""What drives the platform's workflows through an orchestrator."""
