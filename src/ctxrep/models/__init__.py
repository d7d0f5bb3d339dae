"""The models: the ELMo biLM and its ScalarMix, BERT and its Hugging Face interop."""
