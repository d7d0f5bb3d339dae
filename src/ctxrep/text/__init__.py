"""Text processing: sentence splitting, WordPiece, the biLM word vocabulary, ELMo char ids."""
