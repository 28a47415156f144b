"""ppdm.cli"""
