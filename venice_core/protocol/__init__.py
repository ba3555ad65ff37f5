"""The version-topic wire protocol, modelled on Venice's KafkaMessageEnvelope. Imports nothing above it."""
