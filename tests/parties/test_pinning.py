"""Certificates are pinned in both directions: a second certificate for a member's name,
issued by the consortium's own CA (an old one after a rotation, a mis-issued one), can
neither answer calls as that member nor make them."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from cryptography.hazmat.primitives import serialization

from ppdm.parties.consortium import _key_pem, _pem, issue_certificate
from ppdm.parties.grpc_net import open_channel
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.testbed.consortia import LoopbackConsortium

pytestmark = pytest.mark.grpc


def _ca(tmp_path):
    key = serialization.load_pem_private_key((tmp_path / "private" / "ca.key").read_bytes(), None)
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    return key, cert


class _Impostor(party_pb2_grpc.PartyServicer):
    def Health(self, request, context):
        return pb.HealthReply(party="bob", consortium="ppdm-testbed", version="impostor")


def test_a_second_ca_certificate_for_a_member_is_refused_both_ways(tmp_path):
    with LoopbackConsortium(("alice", "bob"), tmp_path, keep_ca_key=True) as bed:
        alice = bed.settings["alice"]
        # The genuine bob answers alice's channel.
        reply = party_pb2_grpc.PartyStub(open_channel(alice, "bob")).Health(
            pb.HealthRequest(), timeout=5
        )
        assert reply.party == "bob"
        ca_key, ca_cert = _ca(tmp_path)
        key, cert = issue_certificate(ca_key, ca_cert, "bob", hosts=["127.0.0.1"])
        fake_key, fake_cert = _key_pem(key), _pem(cert)

        # Outgoing: an impostor server with the second certificate on bob's address.
        address = alice.consortium.party("bob").address
        bed.nodes["bob"].stop(grace=0)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        party_pb2_grpc.add_PartyServicer_to_server(_Impostor(), server)
        creds = grpc.ssl_server_credentials(
            [(fake_key, fake_cert)],
            root_certificates=alice.consortium.ca_certificate_pem,
            require_client_auth=True,
        )
        assert server.add_secure_port(address, creds)
        server.start()
        try:
            channel = open_channel(alice, "bob")
            with pytest.raises(grpc.RpcError) as info:
                party_pb2_grpc.PartyStub(channel).Health(pb.HealthRequest(), timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            channel.close()
            # ...whereas a channel trusting the CA alone (the old behaviour) is fooled.
            naive = grpc.secure_channel(
                address,
                grpc.ssl_channel_credentials(
                    root_certificates=alice.consortium.ca_certificate_pem,
                    private_key=alice.private_key_pem,
                    certificate_chain=alice.certificate_pem,
                ),
                options=[("grpc.ssl_target_name_override", "bob")],
            )
            fooled = party_pb2_grpc.PartyStub(naive).Health(pb.HealthRequest(), timeout=5)
            assert fooled.version == "impostor"
            naive.close()
        finally:
            server.stop(0)

        # Incoming: the impostor calls alice's node as bob.
        impostor = grpc.secure_channel(
            alice.consortium.party("alice").address,
            grpc.ssl_channel_credentials(
                root_certificates=alice.certificate_pem,
                private_key=fake_key,
                certificate_chain=fake_cert,
            ),
            options=[("grpc.ssl_target_name_override", "alice")],
        )
        with pytest.raises(grpc.RpcError) as info:
            party_pb2_grpc.PartyStub(impostor).Health(pb.HealthRequest(), timeout=5)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        impostor.close()
