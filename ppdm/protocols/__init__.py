"""ppdm.protocols"""
