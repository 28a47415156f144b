"""Generated protobuf/gRPC code for ``proto/ppdm/v1`` (do not edit; regenerate with
``python -m ppdm.proto.generate``)."""
