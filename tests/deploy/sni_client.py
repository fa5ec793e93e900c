"""A confluent-kafka client run inside a mount namespace whose /etc/hosts the SNI test wrote:
it lists the brokers, makes a topic with a partition led by every broker and produces to each,
then prints what it saw as JSON. Arguments: bootstrap, CA file, topic, partitions."""

from __future__ import annotations

import json
import sys

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def main(bootstrap: str, ca: str, topic: str, partitions: int) -> None:
    tls = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
    admin = AdminClient(tls)
    brokers = admin.list_topics(timeout=30).brokers
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    leaders: dict[int, int] = {}
    for _ in range(60):
        meta = admin.list_topics(topic, timeout=30).topics[topic]
        leaders = {p.id: p.leader for p in meta.partitions.values() if p.leader >= 0}
        if len(leaders) == partitions:
            break
    producer = Producer({**tls, "acks": "all", "message.timeout.ms": 30000})
    errors: list[str] = []

    def delivered(err: KafkaException | None, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for partition in range(partitions):
        producer.produce(topic, b"through one port", partition=partition, on_delivery=delivered)
    left = producer.flush(60)
    json.dump(
        {
            "brokers": {str(b.id): f"{b.host}:{b.port}" for b in brokers.values()},
            "leaders": sorted(set(leaders.values())),
            "undelivered": left,
            "errors": errors,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
