"""Service Bus adapters."""
