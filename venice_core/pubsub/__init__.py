"""Kafka: admin operations, the protocol writer, consumers. Topic names come from `RegionConfig.version_topic`."""
