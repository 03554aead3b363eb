"""mha: 멀티헤드 어텐션, 파일 하나에 한 단계씩.

아래 순서대로 파일마다 TODO를 채우고, 한 파일을 끝낼 때마다 `pytest assignments/`를 실행하세요.
각 파일의 맨 위 설명에는 무엇을 작성할지와, 작은 텐서로 계산한 예시(`>>>`)가 있습니다.
그 단계가 왜 필요한지는 노트북에서 각 파일의 설명 뒤에 이어집니다.
예시의 출력은 정답 코드가 실제로 출력하는 값 그대로입니다: 같은 줄을 여러분의 코드로 실행해
비교해 보세요 (`<BLANKLINE>`은 출력의 빈 줄을 뜻합니다).

모든 파일에 공통인 규칙:
    * 모든 텐서는 배치가 먼저입니다: (B, ...)
    * B = 배치 크기, L = 시퀀스 길이, D = d_model, H = 헤드 수(num_heads), d_k = D // H
    * 마스크는 bool 텐서이고 True = 막힘 (그 키를 보면(attend) 안 됨)입니다.
      nn.MultiheadAttention과 같은 규칙입니다. 주의: F.scaled_dot_product_attention은 반대 규칙
      (True = 볼 수 있음)을 씁니다.

이 파일은 일부러 아무것도 import하지 않습니다: 한 단계의 파일에 실수가 있어도 나머지 단계는
채점되어야 하기 때문입니다.

단계:

    padding.py     pad_batch                          패딩: 토큰 id 리스트 -> (B, L) 텐서 + 패딩 마스크
    embedding.py   TokenEmbedding                     임베딩: 토큰 id -> 벡터 (B, L, d_model)
    projection.py  QKVProjection, FusedQKVProjection  쿼리/키/밸류 프로젝션
    heads.py       split_heads, merge_heads           헤드 분할과 결합: (B, L, D) <-> (B, H, L, d_k)
    attention.py   scaled_dot_product_attention       스케일드 닷-프로덕트 어텐션
    masking.py     padding_mask, causal_mask          마스킹: 쿼리가 보면 안 되는 키
    output.py      OutputProjection                   출력 프로젝션: 헤드 결합 후 w_o
    mha.py         MultiHeadAttention                 멀티헤드 어텐션: 위의 모든 것을 모듈 하나로
"""
